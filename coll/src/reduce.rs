//! Reduction kernels over typed little-endian byte slices: `acc ← acc ⊕ src` element by
//! element, and the final division of `avg`. Integer types wrap (as NCCL's do), floating-point
//! types round as their arithmetic does; half and bfloat16 compute in f32 and round back.
//!
//! The ring applies `⊕` with the partial result on the left and the local input on the right,
//! hop after hop, and [`fold`] does the same in the same order, so an expected value is
//! bit-identical to what the ring computes even where floating-point addition is not
//! associative.

use half::{bf16, f16};

use crate::dtype::{DataType, RedOp};

/// One element type's arithmetic.
trait Element: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn from_bits(bits: u64) -> Self;
    fn to_bits(self) -> u64;
    fn apply(op: RedOp, a: Self, b: Self) -> Self;
    fn div(self, n: u32) -> Self;
}

macro_rules! int_element {
    ($t:ty) => {
        impl Element for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("element-sized chunk"))
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
            fn to_bits(self) -> u64 {
                // Zero-extended bit pattern of the element.
                let mut w = [0u8; 8];
                w[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
                u64::from_le_bytes(w)
            }
            #[inline(always)]
            fn apply(op: RedOp, a: Self, b: Self) -> Self {
                match op {
                    RedOp::Sum | RedOp::Avg => a.wrapping_add(b),
                    RedOp::Prod => a.wrapping_mul(b),
                    RedOp::Max => a.max(b),
                    RedOp::Min => a.min(b),
                }
            }
            fn div(self, n: u32) -> Self {
                // n ranks fit every integer type's range except the 8-bit ones, where the
                // division is done wide and the quotient fits.
                (i128::from(self) / i128::from(n)) as $t
            }
        }
    };
}

int_element!(i8);
int_element!(u8);
int_element!(i32);
int_element!(u32);
int_element!(i64);
int_element!(u64);

macro_rules! float_element {
    ($t:ty, $bits:ty, $wide:ty, $to_wide:expr, $from_wide:expr) => {
        impl Element for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("element-sized chunk"))
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            fn from_bits(bits: u64) -> Self {
                <$t>::from_bits(bits as $bits)
            }
            fn to_bits(self) -> u64 {
                u64::from(<$t>::to_bits(self))
            }
            #[inline(always)]
            fn apply(op: RedOp, a: Self, b: Self) -> Self {
                let (x, y): ($wide, $wide) = ($to_wide(a), $to_wide(b));
                $from_wide(match op {
                    RedOp::Sum | RedOp::Avg => x + y,
                    RedOp::Prod => x * y,
                    RedOp::Max => x.max(y),
                    RedOp::Min => x.min(y),
                })
            }
            fn div(self, n: u32) -> Self {
                $from_wide($to_wide(self) / (n as $wide))
            }
        }
    };
}

float_element!(f32, u32, f32, |v| v, |v| v);
float_element!(f64, u64, f64, |v| v, |v| v);
float_element!(f16, u16, f32, f16::to_f32, f16::from_f32);
float_element!(bf16, u16, f32, bf16::to_f32, bf16::from_f32);

fn reduce_typed<T: Element>(op: RedOp, acc: &mut [u8], src: &[u8]) {
    for (a, b) in acc.chunks_exact_mut(T::SIZE).zip(src.chunks_exact(T::SIZE)) {
        T::apply(op, T::load(a), T::load(b)).store(a);
    }
}

fn divide_typed<T: Element>(buf: &mut [u8], n: u32) {
    for a in buf.chunks_exact_mut(T::SIZE) {
        T::load(a).div(n).store(a);
    }
}

fn fold_typed<T: Element>(op: RedOp, values: impl Iterator<Item = u64>) -> Option<u64> {
    values
        .map(T::from_bits)
        .reduce(|a, b| T::apply(op, a, b))
        .map(T::to_bits)
}

macro_rules! dispatch {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DataType::Int8 => $f::<i8>($($arg),*),
            DataType::Uint8 => $f::<u8>($($arg),*),
            DataType::Int32 => $f::<i32>($($arg),*),
            DataType::Uint32 => $f::<u32>($($arg),*),
            DataType::Int64 => $f::<i64>($($arg),*),
            DataType::Uint64 => $f::<u64>($($arg),*),
            DataType::Half => $f::<f16>($($arg),*),
            DataType::Float => $f::<f32>($($arg),*),
            DataType::Double => $f::<f64>($($arg),*),
            DataType::Bfloat16 => $f::<bf16>($($arg),*),
        }
    };
}

/// `acc[i] ← acc[i] ⊕ src[i]` for every element (`avg` adds; see [`divide`]).
///
/// # Panics
/// If the slices differ in length or are not whole elements (caller misuse).
pub fn reduce(dtype: DataType, op: RedOp, acc: &mut [u8], src: &[u8]) {
    assert_eq!(
        acc.len(),
        src.len(),
        "reduce over slices of different lengths"
    );
    assert_eq!(acc.len() % dtype.size(), 0, "reduce over partial elements");
    dispatch!(dtype, reduce_typed, op, acc, src);
}

/// Divides every element by `n` (the end of `avg`).
pub fn divide(dtype: DataType, buf: &mut [u8], n: u32) {
    assert_eq!(buf.len() % dtype.size(), 0, "divide over partial elements");
    dispatch!(dtype, divide_typed, buf, n);
}

/// `v0 ⊕ v1 ⊕ … ⊕ vk`, left to right, over element bit patterns (zero-extended to 64 bits);
/// `None` for no values. With `avg`, the caller divides the result ([`divide_bits`]).
pub fn fold(dtype: DataType, op: RedOp, values: impl Iterator<Item = u64>) -> Option<u64> {
    dispatch!(dtype, fold_typed, op, values)
}

fn divide_bits_typed<T: Element>(bits: u64, n: u32) -> u64 {
    T::from_bits(bits).div(n).to_bits()
}

/// One element (bit pattern) divided by `n`.
pub fn divide_bits(dtype: DataType, bits: u64, n: u32) -> u64 {
    dispatch!(dtype, divide_bits_typed, bits, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn every_operator_on_floats() {
        let a = [1.5_f32, -2.0, 3.0];
        let b = [2.0_f32, 5.0, -4.0];
        let cases = [
            (RedOp::Sum, [3.5, 3.0, -1.0]),
            (RedOp::Prod, [3.0, -10.0, -12.0]),
            (RedOp::Max, [2.0, 5.0, 3.0]),
            (RedOp::Min, [1.5, -2.0, -4.0]),
        ];
        for (op, want) in cases {
            let mut acc = f32s(&a);
            reduce(DataType::Float, op, &mut acc, &f32s(&b));
            assert_eq!(acc, f32s(&want), "{op}");
        }
        let mut acc = f32s(&[3.0, 9.0]);
        divide(DataType::Float, &mut acc, 3);
        assert_eq!(acc, f32s(&[1.0, 3.0]));
    }

    #[test]
    fn integers_wrap_and_signed_ones_compare_signed() {
        let mut acc = vec![250_u8, 3];
        reduce(DataType::Uint8, RedOp::Sum, &mut acc, &[10, 4]);
        assert_eq!(acc, [4, 7]);
        let mut acc = vec![0xff_u8, 1]; // int8: -1, 1
        reduce(DataType::Int8, RedOp::Max, &mut acc, &[0, 0xfe]); // 0, -2
        assert_eq!(acc, [0, 1]);
        let mut acc: Vec<u8> = (-7_i32).to_le_bytes().to_vec();
        divide(DataType::Int32, &mut acc, 2);
        assert_eq!(acc, (-3_i32).to_le_bytes());
        let mut acc = vec![200_u8];
        divide(DataType::Uint8, &mut acc, 64);
        assert_eq!(acc, [3]);
    }

    #[test]
    fn half_types_compute_in_f32_and_round_back() {
        let one = f16::from_f32(1.0).to_bits().to_le_bytes();
        let two = f16::from_f32(2.0).to_bits().to_le_bytes();
        let mut acc = one.to_vec();
        reduce(DataType::Half, RedOp::Sum, &mut acc, &two);
        assert_eq!(acc, f16::from_f32(3.0).to_bits().to_le_bytes());
        let mut acc = bf16::from_f32(3.0).to_bits().to_le_bytes().to_vec();
        reduce(
            DataType::Bfloat16,
            RedOp::Prod,
            &mut acc,
            &bf16::from_f32(-2.0).to_bits().to_le_bytes(),
        );
        assert_eq!(acc, bf16::from_f32(-6.0).to_bits().to_le_bytes());
    }

    #[test]
    fn fold_matches_the_kernel_applied_hop_after_hop() {
        // Values whose float sum depends on the order: the fold must follow it.
        let vals = [1.0e8_f32, 1.0, -1.0e8, 0.5];
        let mut acc = f32s(&vals[..1]);
        for v in &vals[1..] {
            reduce(DataType::Float, RedOp::Sum, &mut acc, &f32s(&[*v]));
        }
        let bits = fold(
            DataType::Float,
            RedOp::Sum,
            vals.iter().map(|v| u64::from(v.to_bits())),
        )
        .unwrap();
        assert_eq!(acc, (bits as u32).to_le_bytes());
        assert_eq!(fold(DataType::Int32, RedOp::Min, core::iter::empty()), None);
        let neg = fold(
            DataType::Int8,
            RedOp::Min,
            [3_u64, u64::from((-5_i8) as u8)].into_iter(),
        );
        assert_eq!(neg, Some(u64::from((-5_i8) as u8)));
        assert_eq!(
            divide_bits(DataType::Int8, u64::from((-9_i8) as u8), 2),
            u64::from((-4_i8) as u8)
        );
    }
}
