"""Every request and response body the OpenAPI document publishes: `schemas/<feature>.py` holds
the bodies of `routes/<feature>.py`, and `schemas/fields.py` the field types they share
(docs/http.md#bodies). Route modules declare none of their own; a feature's app builds only its
own bodies (api_funcs/functions.py)."""
