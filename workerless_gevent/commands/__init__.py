"""The command-line surface: the usage text and its dispatch, check, send, demo, stats, redrive and the IAM
policy. Only this package prints."""
