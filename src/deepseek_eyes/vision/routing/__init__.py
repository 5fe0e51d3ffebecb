"""Routing: the ordered VisionRouter, its registry, per-route trust (health, circuits, the
pixel probe), single flight, the attempts log, and the pipeline of stages one acquisition
walks (lookup, intake, routes, gate, store)."""
