//! Compiling a kernel's loops for the widest vectors the CPU has, chosen at run time: the
//! binary is built for baseline x86-64 (SSE2, four lanes) so that it runs everywhere, and
//! `vectorized!` compiles a function three times (AVX-512, AVX2 + FMA, baseline).

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
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the features the function is compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
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
