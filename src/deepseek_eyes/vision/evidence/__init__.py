"""Evidence: the strict schema gate, canonicalization, extraction from raw answers, the
immutable cache and overlays."""
