"""HA on ZooKeeper through kazoo: the client and layout (client.py), fenced writes (fencing.py),
the leader election and retrieval drivers, the stores, and ZooKeeperHaServices."""
