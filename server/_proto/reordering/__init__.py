"""Package for the reordering.v1 generated modules."""
