//! The same programs on real threads: every rank a thread over its own software NIC, the NICs
//! joined by in-memory links, every element checked; a fabric of no planes is refused.

use mrc_coll::backend::mem::{MemBackend, MemBackendError};
use mrc_coll::backend::{fold_all, program_opts};
use mrc_coll::bench::Average;
use mrc_coll::{BenchOpts, Collective, DataType, RedOp};

#[test]
fn every_collective_is_exact_on_threads() {
    for coll in Collective::ALL {
        let mut o = BenchOpts::new(coll);
        o.min_bytes = 8;
        o.max_bytes = 256 * 1024;
        o.step_factor = 32;
        o.iters = 2;
        o.slice_bytes = 32 * 1024;
        if coll == Collective::AllReduce || coll == Collective::Reduce {
            o.dtypes = vec![DataType::Float, DataType::Int8];
            o.ops = vec![RedOp::Sum, RedOp::Min];
        }
        // Rooted: from every root in turn. Hypercube: a power of two.
        let ranks = if coll == Collective::HyperCube { 4 } else { 3 };
        let rows = o.rows(ranks).unwrap();
        let reports = MemBackend::new(ranks, 2)
            .run(&rows, &program_opts(&o, false), 32)
            .expect("threads ran");
        for r in &reports {
            assert_eq!(r.error, None, "{coll}");
            assert!(r.done, "{coll}");
        }
        for (i, l) in fold_all(&rows, &reports, Average::Mean).iter().enumerate() {
            for (p, r) in l.iter().enumerate() {
                let r = r.unwrap_or_else(|| panic!("{coll} line {i}/{p}: no result"));
                assert_eq!(r.wrong, Some(0), "{coll} line {i}/{p}");
                assert!(r.time_us > 0.0);
            }
        }
    }
}

#[test]
fn a_fabric_of_no_planes_is_an_error_not_a_panic() {
    let o = BenchOpts::new(Collective::AllReduce);
    let rows = o.rows(2).unwrap();
    for planes in [0, 33] {
        let err = MemBackend::new(2, planes)
            .run(&rows, &program_opts(&o, false), 32)
            .expect_err("no fabric");
        assert!(matches!(err, MemBackendError::Planes(_)), "{err}");
        assert!(
            err.to_string().contains(&format!("{planes} planes")),
            "{err}"
        );
    }
}
