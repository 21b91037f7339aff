"""The chaos suite (issue 22): a seeded schedule of faults (``schedule``, pure) injected by thin
drivers (``injectors``, ``faultfs``, ``tcpproxy``) into a local HA session running exactly-once
jobs (``workload``), measured (``measure``) and checked at the end (``checker``); ``runner`` ties
them together and is ``scripts/chaos``. See docs/RELIABILITY.md."""
