//! A TCP rendezvous: rank 0 listens, every other rank connects and says who it is; an
//! all-gather sends each rank's bytes to rank 0, which answers everyone with all of them.
//! Messages are length-prefixed (u32, little-endian).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{Bootstrap, BootstrapError};

/// Bytes one message may carry.
const MAX_MESSAGE: usize = 64 << 20;

/// The TCP rendezvous of one rank.
#[derive(Debug)]
pub struct TcpBootstrap {
    rank: usize,
    size: usize,
    /// Rank 0: a stream per other rank (index rank-1). Others: the stream to rank 0.
    peers: Vec<TcpStream>,
}

fn send(s: &mut TcpStream, bytes: &[u8]) -> Result<(), BootstrapError> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| BootstrapError::Protocol("message too long".into()))?;
    s.write_all(&len.to_le_bytes())?;
    s.write_all(bytes)?;
    Ok(())
}

fn recv(s: &mut TcpStream) -> Result<Vec<u8>, BootstrapError> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_MESSAGE {
        return Err(BootstrapError::Protocol(format!("a {len}-byte message")));
    }
    let mut buf = vec![0; len];
    s.read_exact(&mut buf)?;
    Ok(buf)
}

impl TcpBootstrap {
    /// Joins the run of `size` ranks as `rank`; rank 0 listens on `addr`, the others connect
    /// to it (retrying until `timeout`, rank 0 may start later).
    pub fn join(
        rank: usize,
        size: usize,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        if rank >= size {
            return Err(BootstrapError::Protocol(format!("rank {rank} of {size}")));
        }
        let deadline = Instant::now() + timeout;
        let mut peers = Vec::new();
        if rank == 0 {
            let listener = TcpListener::bind(addr)?;
            let mut slots: Vec<Option<TcpStream>> = (1..size).map(|_| None).collect();
            while slots.iter().any(Option::is_none) {
                let (mut s, _) = listener.accept()?;
                s.set_read_timeout(Some(timeout))?;
                let hello = recv(&mut s)?;
                let r = hello
                    .try_into()
                    .ok()
                    .map(u64::from_le_bytes)
                    .and_then(|r| usize::try_from(r).ok())
                    .filter(|&r| r >= 1 && r < size)
                    .ok_or_else(|| BootstrapError::Protocol("bad hello".into()))?;
                if slots[r - 1].replace(s).is_some() {
                    return Err(BootstrapError::Protocol(format!("rank {r} joined twice")));
                }
            }
            peers = slots.into_iter().flatten().collect();
        } else {
            let mut s = loop {
                match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() >= deadline => return Err(e.into()),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            s.set_read_timeout(Some(timeout))?;
            s.set_nodelay(true)?;
            send(&mut s, &(rank as u64).to_le_bytes())?;
            peers.push(s);
        }
        Ok(Self { rank, size, peers })
    }
}

impl Bootstrap for TcpBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        if self.rank == 0 {
            let mut all = vec![mine.to_vec()];
            for s in &mut self.peers {
                all.push(recv(s)?);
            }
            let mut packed = Vec::new();
            for a in &all {
                packed.extend_from_slice(&(a.len() as u32).to_le_bytes());
                packed.extend_from_slice(a);
            }
            for s in &mut self.peers {
                send(s, &packed)?;
            }
            Ok(all)
        } else {
            let s = &mut self.peers[0];
            send(s, mine)?;
            let packed = recv(s)?;
            let mut all = Vec::with_capacity(self.size);
            let mut rest = &packed[..];
            while !rest.is_empty() {
                let (len, tail) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| BootstrapError::Protocol("truncated".into()))?;
                let len = u32::from_le_bytes(*len) as usize;
                if tail.len() < len {
                    return Err(BootstrapError::Protocol("truncated".into()));
                }
                all.push(tail[..len].to_vec());
                rest = &tail[len..];
            }
            if all.len() != self.size {
                return Err(BootstrapError::Protocol(format!(
                    "{} answers for {} ranks",
                    all.len(),
                    self.size
                )));
            }
            Ok(all)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_ranks_gather_each_others_bytes_twice() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let threads: Vec<_> = (0..4)
            .map(|r| {
                std::thread::spawn(move || {
                    let mut b = TcpBootstrap::join(r, 4, addr, Duration::from_secs(20)).unwrap();
                    let first = b.all_gather(&vec![r as u8; r]).unwrap();
                    b.barrier().unwrap();
                    let second = b.all_gather(format!("rank{r}").as_bytes()).unwrap();
                    (first, second)
                })
            })
            .collect();
        for t in threads {
            let (first, second) = t.join().unwrap();
            for (r, v) in first.iter().enumerate() {
                assert_eq!(v, &vec![r as u8; r]);
            }
            assert_eq!(second[3], b"rank3");
        }
    }
}
