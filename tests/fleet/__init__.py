"""Many crawlers, one state: the remote client, the reference service, both together."""
