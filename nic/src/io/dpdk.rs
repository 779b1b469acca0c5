//! DPDK ports as a [`PacketIo`](super::PacketIo).
