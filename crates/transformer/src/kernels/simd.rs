//! Compiling a kernel's loops for the widest vectors the CPU has, chosen at run time: the
//! binary is built for baseline x86-64 (SSE2, four lanes) so that it runs everywhere, and
//! `vectorized!` compiles a function three times (AVX-512, AVX2 + FMA, baseline) and runs the
//! widest one [`super::isa`] allows.

/// Defines `$name`, whose body is compiled for the best vector extension the CPU has: AVX-512,
/// AVX2 + FMA, or the baseline. The body may name `FUSED` (whether `mul_add` is one
/// instruction) for [`fma`]. It runs on one thread: callers split work into tasks first, and a
/// closure inside the body must not hold the hot loop (a closure is compiled on its own,
/// without the features, and its `mul_add` becomes a library call).
macro_rules! vectorized {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn body<const FUSED: bool>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? { body::<true>($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { body::<true>($($arg),*) }
                if $crate::kernels::isa::Isa::Avx512.runs() {
                    // SAFETY: the CPU has the features the function is compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if $crate::kernels::isa::Isa::Avx2.runs() {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body::<false>($($arg),*)
        }
    };
}

/// `a b + c`, as one instruction where the CPU has FMA (a library call otherwise).
#[inline(always)]
pub fn fma<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FUSED {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `sum_k a_k b_k` over `LANES` accumulators (64: four AVX-512 registers, eight of AVX2; 16:
/// one AVX-512 register), whose chains of multiply-adds run side by side instead of waiting
/// on one another. Plain loops, no closures: a closure is compiled on its own, without the
/// caller's target features, and its `mul_add` becomes a library call.
#[inline(always)]
pub fn dot<const FUSED: bool, const LANES: usize>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut lanes = [0f32; LANES];
    let blocks = n / LANES;
    for block in 0..blocks {
        let (a, b) = (&a[block * LANES..][..LANES], &b[block * LANES..][..LANES]);
        for k in 0..LANES {
            lanes[k] = fma::<FUSED>(a[k], b[k], lanes[k]);
        }
    }
    let mut total = 0.0;
    for k in blocks * LANES..n {
        total = fma::<FUSED>(a[k], b[k], total);
    }
    for lane in lanes {
        total += lane;
    }
    total
}

/// e^x to within 2 ulp for x in [-87, 88] (clamped there; every softmax here takes x <= 0):
/// Cephes' `expf`, written without branches or library calls so that a loop of it compiles to
/// vector instructions. `f32::exp` is a call per element into libm, which made the
/// vocabulary's exponentials a tenth of a beam search.
#[inline(always)]
pub fn exp<const FUSED: bool>(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, so that n ln 2 is exact for every n in range.
    const LN_2_HIGH: f32 = 0.693_359_4;
    const LN_2_LOW: f32 = -2.121_944_4e-4;
    // Adding then subtracting 1.5 * 2^23 rounds to the nearest integer in plain arithmetic.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = fma::<FUSED>(-n, LN_2_LOW, fma::<FUSED>(-n, LN_2_HIGH, x));
    let mut p = 1.987_569_1e-4;
    p = fma::<FUSED>(p, r, 1.398_199_9e-3);
    p = fma::<FUSED>(p, r, 8.333_452e-3);
    p = fma::<FUSED>(p, r, 4.166_579_6e-2);
    p = fma::<FUSED>(p, r, 1.666_666_5e-1);
    p = fma::<FUSED>(p, r, 0.5);
    let e_r = fma::<FUSED>(p, r * r, r) + 1.0;
    // 2^n from the exponent bits.
    e_r * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_of_libm_over_its_range() {
        let mut x = -87.0f32;
        while x <= 88.0 {
            for got in [exp::<true>(x), exp::<false>(x)] {
                let want = (x as f64).exp();
                let relative = ((got as f64 - want) / want).abs();
                assert!(relative < 2.5e-7, "exp({x}) = {got}, want {want}");
            }
            x += 0.0137;
        }
        assert_eq!(exp::<true>(0.0), 1.0);
        assert!(exp::<true>(-1000.0) < 1e-37);
    }
}
