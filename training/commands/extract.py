"""`moses-reorder extract`: aligned corpus -> example store (and optionally Moses's text files).

Argument parsing only; the work is training.api.extract_store.
"""

from __future__ import annotations

import argparse
import sys
import time

from training import defaults
from training.commands.argtypes import add_parallel_arguments, whole_number


def run(args: argparse.Namespace) -> int:
    from training.api import extract_store

    started = time.perf_counter()
    meta = extract_store(args.src, args.tgt, args.align, args.out, models=args.model,
                         max_phrase_length=args.max_phrase_length, max_sentence_length=args.max_sentence_length,
                         chunk_examples=args.chunk_examples, moses_format=args.moses_format,
                         progress=not args.quiet, jobs=args.jobs, scheduler=args.scheduler, memory=args.memory)
    seconds = time.perf_counter() - started
    if not args.quiet:
        print(f"extract: {meta['counts']['sentences']} sentence pairs -> {meta['counts']['examples']} examples "
              f"in {meta['counts']['chunks']} chunk(s), labels {', '.join(meta['label_columns'])}; "
              f"{seconds:.1f} s; store {args.out}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "extract",
        description="Extract every consistent phrase pair of a word-aligned corpus with its orientation "
                    "labels, exactly as Moses's `extract ... orientation --model M` does, into an example "
                    "store (columnar numpy arrays). Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--src", required=True, help="source side (what the decoder translates from), tokenized")
    p.add_argument("--tgt", required=True, help="target side, tokenized, parallel to --src")
    p.add_argument("--align", required=True, help="word alignment, Pharaoh i-j (0-based, i=source, j=target)")
    p.add_argument("--out", required=True, help="store directory to create (must not exist)")
    p.add_argument("--model", action="append", metavar="M",
                   help="Moses extraction model {wbe|phrase|hier}-{msd|mslr|mono}; repeatable "
                        f"(default {defaults.EXTRACT_MODELS[0]})")
    p.add_argument("--max-phrase-length", type=whole_number(1), default=defaults.MAX_PHRASE_LENGTH,
                   help="maximum phrase length on either side (Moses's MAXLEN, default %(default)s)")
    p.add_argument("--max-sentence-length", type=whole_number(1), default=defaults.MAX_SENTENCE_LENGTH,
                   help="refuse longer sentences (default %(default)s, at most 32767)")
    p.add_argument("--chunk-examples", type=whole_number(1), default=defaults.CHUNK_EXAMPLES,
                   help="examples per store chunk, whole sentences (default %(default)s)")
    p.add_argument("--moses-format", action="store_true",
                   help="also write Moses's `extract` and `extract.o` text files into the store directory")
    add_parallel_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)
