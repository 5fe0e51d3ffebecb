"""Routing: the ordered VisionRouter, its registry, per-route trust (health, circuits, the
pixel probe), single flight and the attempts log."""
