"""The wire: JSON-RPC framing, protocol versions, RFC 6570 URI templates and sealed cursors.

Pure code: nothing here imports Django models, settings or HTTP machinery (``import-linter`` enforces it).
"""
