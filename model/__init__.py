"""Golden model of iWARP over SCTP: wire codecs and protocol semantics.

Pure Python, sans-I/O: bytes (and, for timers, the current time) in; events,
structures and bytes out.  Nothing here opens a socket, sleeps or reads a
clock.  Of the project it imports only `abi` (the engine ABI, plain Python);
never `hdl`, `sim` or `driver`, nor Amaranth.

One calling convention for every protocol object (the SCTP `Association`
and `Listener`, `DdpSessions`, `RdmapEndpoint`, the software RNIC
`SoftRnic`), in the style of h11, h2 and aioquic:

    obj.receive(data, now)        input: one unit of data from the layer below
    obj.next_timeout()            -> float | None: when `handle_timeout` is due
    obj.handle_timeout(now)       timers: call when now >= next_timeout()
    obj.data_to_send(now)         -> list[...]: everything to send now
    obj.next_events()             -> list[Event]: every event queued since the last call

* `receive` takes the data first and the current time second; any further
  argument follows them (keyword where optional).  Its unit is the layer's:
  an Ethernet frame (`SoftRnic`), an SCTP packet (`Association`,
  `Listener`), a (stream, PPID, user data) message (`DdpSessions`), a DDP
  segment (`RdmapEndpoint`).  `data_to_send` returns the same unit for the
  peer's `receive`.
* Only an object with timers takes `now`: `DdpSessions` and
  `RdmapEndpoint` have none, so their `receive(data, ...)` and
  `data_to_send()` take no time.
* Nothing returns events.  `receive`, `handle_timeout` and the user calls
  (`accept`, `acknowledged`, posting work...) queue them; `next_events()`
  drains the queue, in the order they happened.  Completions are events
  (`WorkCompleted`, `WorkCompletion`...).  Call `data_to_send` and
  `next_events` after any other call.
* A state machine keeps its transitions in a table of
  (state, trigger) -> (handler, next state, RFC section); a pair that has
  no row raises a `model.errors.TransitionError` subclass instead of being
  ignored.

`model.ddp.sink.DdpSink.receive(segment, sequence)` is the one exception: it
is the placement step of one segment inside the RDMAP endpoint and the
engine scoreboard, and returns that segment's outcome (placed, delivered,
or an error) at once, like a decoder's result.
"""
