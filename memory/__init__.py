"""Eywa, the Macupos memory core: transcripts → deterministic markdown → handoffs → indexes → retrieval."""
