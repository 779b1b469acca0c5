//! `mrc-nic`: the software NIC that runs an MRC engine on a poll-mode thread.
