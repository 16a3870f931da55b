"""Why some bytes are not a valid request message: the field and byte offset to blame.

upb, the protobuf runtime, says only "Wire format was corrupt" or "String field had bad
UTF-8" when a request does not parse. A client (the Moses stub, grpcurl, a fuzzer) needs
to know which field of which message was wrong, so after a failed parse the server walks
the top-level fields once more, here, and names the first one that breaks the wire format
(issue 31). This runs on the error path only and never decides anything: upb's parse is
the one that accepts or refuses; this module must not be used to read a request.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# Locating an error stops after this many top-level fields (an unpacked repeated field can
# have millions); past it the message says only that the request is malformed.
MAX_FIELDS_WALKED = 4096


def _varint(raw: bytes, pos: int) -> tuple[int | None, int]:
    """(value, position after it), or (None, pos) when truncated or longer than 10 bytes."""
    value, shift = 0, 0
    for i in range(pos, min(pos + 10, len(raw))):
        value |= (raw[i] & 0x7F) << shift
        if raw[i] < 0x80:
            return value, i + 1
        shift += 7
    return None, pos


def _name(field: FieldDescriptor | None, number: int) -> str:
    return f"field {field.name} ({number})" if field is not None else f"unknown field {number}"


def locate_decode_error(raw: bytes, descriptor: Descriptor) -> str | None:
    """The first wire-format fault of `raw` read as a `descriptor` message, as
    "byte B: field NAME (N): what is wrong"; None when none is found (then the caller
    reports the runtime's own reason)."""
    pos, end = 0, len(raw)
    for _ in range(MAX_FIELDS_WALKED):
        if pos >= end:
            return None
        start = pos
        key, pos = _varint(raw, pos)
        if key is None:
            return f"byte {start}: truncated or overlong field key"
        number, wire = key >> 3, key & 7
        field = descriptor.fields_by_number.get(number)
        where = f"byte {start}: {_name(field, number)}"
        if number == 0:
            return f"byte {start}: field number 0 is not valid protobuf"
        if wire == 0:
            _, after = _varint(raw, pos)
            if after == pos:
                return f"{where}: truncated varint"
            pos = after
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                return f"{where}: truncated {'64' if wire == 1 else '32'}-bit value"
        elif wire == 2:
            length, after = _varint(raw, pos)
            if length is None:
                return f"{where}: truncated length"
            if after + length > end:
                return (f"{where}: length {length} runs past the end of the request "
                        f"({end - after} bytes left)")
            payload = raw[after:after + length]
            if field is not None and field.type == FieldDescriptor.TYPE_STRING:
                try:
                    payload.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return f"{where}: not valid UTF-8 (byte {exc.start} of the string)"
            elif field is not None and field.is_repeated and payload[-1:] >= b"\x80":
                # packed varints: a complete one ends in a byte below 0x80
                return f"{where}: packed values end in a truncated varint"
            pos = after + length
        elif wire in (3, 4):
            return f"{where}: groups (wire type {wire}) are not part of this API"
        else:
            return f"{where}: invalid wire type {wire}"
    return f"malformed past byte {pos} (the first {MAX_FIELDS_WALKED} fields are well-formed)"
