"""Safe image intake: untrusted bytes in, one decoded image or an ImageError out."""
