//! The same programs on real threads: every rank a thread over its own software NIC, the NICs
//! joined by in-memory links, every element checked.

use mrc_coll::backend::mem::MemBackend;
use mrc_coll::backend::{fold_all, program_opts};
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
        if coll == Collective::AllReduce {
            o.dtypes = vec![DataType::Float, DataType::Int8];
            o.ops = vec![RedOp::Sum, RedOp::Min];
        }
        let ranks = 3;
        let rows = o.rows(ranks).unwrap();
        let reports = MemBackend::new(ranks, 2)
            .run(coll, &rows, &program_opts(&o, false), 32)
            .expect("threads ran");
        for r in &reports {
            assert_eq!(r.error, None, "{coll}");
            assert!(r.done, "{coll}");
        }
        for (i, l) in fold_all(&rows, &reports).iter().enumerate() {
            for (p, r) in l.iter().enumerate() {
                let r = r.unwrap_or_else(|| panic!("{coll} line {i}/{p}: no result"));
                assert_eq!(r.wrong, Some(0), "{coll} line {i}/{p}");
                assert!(r.time_us > 0.0);
            }
        }
    }
}
