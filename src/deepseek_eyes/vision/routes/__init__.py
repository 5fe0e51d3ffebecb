"""Vision routes: the endpoints and engines that turn an image into evidence text."""
