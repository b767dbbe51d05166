"""TGI v3's router scheduling family (``--batching tgi``)."""
