"""moses-reorder training: corpus I/O, Moses-exact extraction, features, trainers, weight files.

Everything the server needs to score a phrase pair (feature extraction, weight-file
reading, the families' link functions) lives here and is imported by `server/`, so
training and serving can never disagree on features.
"""

__version__ = "0.1.0"
