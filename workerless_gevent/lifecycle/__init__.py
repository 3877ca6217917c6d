"""The running daemon's lifecycle: its parts assembled from the configuration, the delivery engine, SIGHUP
reloads, the SIGHUP held while starting, and the daemon that starts, supervises and stops it all."""
