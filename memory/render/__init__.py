"""`Transcript` → deterministic markdown: the same transcript gives the same bytes on every machine."""
