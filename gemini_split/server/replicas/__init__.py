"""Several ``serve`` processes on one Redis: leases, and relaying a client
to the replica that runs its session."""
