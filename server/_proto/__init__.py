"""Generated gRPC code for proto/reordering (committed; regenerate with `python -m server.protogen`)."""
