"""Foundations every layer uses: the exit-code contract and its errors, safe file writes, key
flattening."""
