"""The benchmark harness behind ``msgstream bench``: produce latency and throughput on any
configured backend, open or closed loop, in HDR histograms.

- :mod:`~msgstream.bench.workload`: the workload (size, channels, producers, rate...) and
  the messages it sends;
- :mod:`~msgstream.bench.scheduler`: the open-loop (coordinated omission corrected) and
  closed-loop senders;
- :mod:`~msgstream.bench.recorder`: HDR histograms (the ``hdrhistogram`` package) per run
  and per interval, the interval log;
- :mod:`~msgstream.bench.runner`: warm-up, measurement, sides interleaved in slices;
- :mod:`~msgstream.bench.targets`: msgstream itself, and the raw baselines the backends
  contribute (entry points ``msgstream.bench_baselines``);
- :mod:`~msgstream.bench.report`: the summary line, tables, the JSON document and schema;
- :mod:`~msgstream.bench.e2e`, :mod:`~msgstream.bench.plot`: ``bench e2e`` and ``bench plot``.

Importing this package imports none of them (the CLI reads only
:mod:`~msgstream.bench.command` to build its parser).
"""
