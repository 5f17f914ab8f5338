"""What a run does to the machine it runs on: the network (net/), the captures (captures/), cgroups,
tracefs, the journal of what to undo, the clock inside a guest, and the run directory it writes."""
