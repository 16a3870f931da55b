"""Model families: one module each, registered in FAMILIES by name."""
