"""The vision bridge: images in, strict schema-validated evidence out.

Images never reach the text model. Each one is hashed, safely decoded, sent through the
ordered :class:`~deepseek_eyes.vision.routing.router.VisionRouter`, canonicalized, gated by the one
schema in ``schemas/visual-evidence.schema.json`` and cached immutably.
"""
