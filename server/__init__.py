"""moses-reorder server: model repository, scoring kernel and the gRPC service.

It must not re-implement feature extraction or model reading: both come from `training`.
"""
