"""Models registered by the plugin (fairseq also auto-imports every module in this folder)."""
