"""What the daemon shows: CloudWatch metrics, Prometheus text, the status server and its page."""
