"""The HTTP and named APIs: public.py (the named endpoints a notebook scripts with gradio_client), rescore.py (its
``rescore_run``), ingest.py (``/api/v1``: runs that users' training scripts record over HTTP, by API token)."""
