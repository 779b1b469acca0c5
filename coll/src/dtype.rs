//! Element types and reduction operators, with the names nccl-tests gives them (`-d`, `-o`).

use core::fmt;
use core::str::FromStr;

/// The element type of a collective's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    /// IEEE 754 binary16.
    Half,
    Float,
    Double,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    Bfloat16,
}

impl DataType {
    /// Every type, in nccl-tests' order (`-d all`).
    pub const ALL: [Self; 10] = [
        Self::Int8,
        Self::Uint8,
        Self::Int32,
        Self::Uint32,
        Self::Int64,
        Self::Uint64,
        Self::Half,
        Self::Float,
        Self::Double,
        Self::Bfloat16,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Self::Int8 | Self::Uint8 => 1,
            Self::Half | Self::Bfloat16 => 2,
            Self::Int32 | Self::Uint32 | Self::Float => 4,
            Self::Int64 | Self::Uint64 | Self::Double => 8,
        }
    }

    /// The nccl-tests name (`type` column).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Int8 => "int8",
            Self::Uint8 => "uint8",
            Self::Int32 => "int32",
            Self::Uint32 => "uint32",
            Self::Int64 => "int64",
            Self::Uint64 => "uint64",
            Self::Half => "half",
            Self::Float => "float",
            Self::Double => "double",
            Self::Bfloat16 => "bfloat16",
        }
    }

    /// A floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            Self::Half | Self::Float | Self::Double | Self::Bfloat16
        )
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name nccl-tests does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?} (one of: {choices})")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
    pub choices: &'static str,
}

impl FromStr for DataType {
    type Err = UnknownName;

    /// nccl-tests' names and its aliases (`char`, `int`, `fp16`, `float32`, `bf16` ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "int8" | "char" => Self::Int8,
            "uint8" => Self::Uint8,
            "int32" | "int" => Self::Int32,
            "uint32" => Self::Uint32,
            "int64" => Self::Int64,
            "uint64" => Self::Uint64,
            "half" | "float16" | "fp16" => Self::Half,
            "float" | "float32" | "fp32" => Self::Float,
            "double" | "float64" | "fp64" => Self::Double,
            "bfloat16" | "bf16" => Self::Bfloat16,
            _ => {
                return Err(UnknownName {
                    what: "data type",
                    name: s.to_owned(),
                    choices: "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 all",
                });
            }
        })
    }
}

/// A reduction operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the number of ranks, once, at the end (integer types truncate).
    Avg,
}

impl RedOp {
    /// Every operator, in nccl-tests' order (`-o all`).
    pub const ALL: [Self; 5] = [Self::Sum, Self::Prod, Self::Max, Self::Min, Self::Avg];

    /// The nccl-tests name (`redop` column).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Prod => "prod",
            Self::Max => "max",
            Self::Min => "min",
            Self::Avg => "avg",
        }
    }
}

impl fmt::Display for RedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RedOp {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "sum" => Self::Sum,
            "prod" => Self::Prod,
            "max" => Self::Max,
            "min" => Self::Min,
            "avg" => Self::Avg,
            _ => {
                return Err(UnknownName {
                    what: "reduction",
                    name: s.to_owned(),
                    choices: "sum prod max min avg all",
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for t in DataType::ALL {
            assert_eq!(t.name().parse::<DataType>(), Ok(t));
        }
        for o in RedOp::ALL {
            assert_eq!(o.name().parse::<RedOp>(), Ok(o));
        }
        assert_eq!("char".parse::<DataType>(), Ok(DataType::Int8));
        assert_eq!("bf16".parse::<DataType>(), Ok(DataType::Bfloat16));
        assert!("float128".parse::<DataType>().is_err());
        assert!("xor".parse::<RedOp>().is_err());
    }
}
