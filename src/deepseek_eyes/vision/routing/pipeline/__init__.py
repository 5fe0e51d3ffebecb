"""One acquisition as a pipeline of stages, in the order they run on a miss.

:mod:`.job` is the one object that walks them; :mod:`.lookup` (the image index and the
evidence cache for the candidate routes), :mod:`.intake` (the bytes, safe decode, blob
store), :mod:`.routes` (the ordered walk under the guard, with :mod:`.gate` judging each
answer) and :mod:`.store` (the immutable cache write and the outcome) each do one job.
The router (:mod:`deepseek_eyes.vision.routing.router`) orders and guards routes and
sequences these stages; it never reaches into what they do.
"""
