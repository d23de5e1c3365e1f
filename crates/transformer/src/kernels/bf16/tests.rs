use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::pack::Strided;
use super::*;

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

fn row_major(data: &[f32], rows: usize, cols: usize) -> Strided<'_> {
    Strided {
        data,
        rows,
        cols,
        row_stride: cols,
        col_stride: 1,
    }
}

/// The engines this CPU can run.
fn engines() -> Vec<Engine> {
    available().to_vec()
}

/// `a b` in f64 from the bf16-rounded inputs (what the kernels must give, up to f32 sums),
/// and the sum of `|a_ik b_kj|` per element (the scale of rounding errors).
fn reference(a: Strided, b: Strided) -> (Vec<f64>, Vec<f64>) {
    let round = |x: f32| f64::from(from_bf16(to_bf16(x)));
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let mut exact = vec![0f64; m * n];
    let mut scale = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            for l in 0..k {
                let x = round(a.data[i * a.row_stride + l * a.col_stride]);
                let y = round(b.data[l * b.row_stride + j * b.col_stride]);
                exact[i * n + j] += x * y;
                scale[i * n + j] += (x * y).abs();
            }
        }
    }
    (exact, scale)
}

fn check(a: Strided, b: Strided, engine: Engine) {
    let (m, n) = (a.rows, b.cols);
    let mut c = vec![f32::NAN; m * n];
    gemm(a, b, &mut c, false, engine).unwrap();
    let (exact, scale) = reference(a, b);
    for (i, ((&got, &want), &scale)) in c.iter().zip(&exact).zip(&scale).enumerate() {
        // f32 sums of k terms: a few ulps of the sum of magnitudes.
        let tolerance = 1e-6 * (a.cols as f64 + 4.0) * scale + 1e-30;
        assert!(
            (f64::from(got) - want).abs() <= tolerance,
            "{engine:?} {m}x{}x{n}: element {i} is {got}, wants {want} (tolerance {tolerance})",
            a.cols
        );
    }
}

#[test]
fn rounding_to_bf16_is_to_nearest_even_and_keeps_nans_and_infinities() {
    assert_eq!(to_bf16(1.0), 0x3f80);
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even (1.0).
    assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
    // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even, up.
    assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
    assert_eq!(to_bf16(1.0 + 1.0 / 256.0 + 1.0 / 65536.0), 0x3f81);
    assert_eq!(to_bf16(-2.5), 0xc020);
    assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
    assert_eq!(from_bf16(to_bf16(f32::MAX)), f32::INFINITY);
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    assert!(from_bf16(to_bf16(f32::from_bits(0x7f80_0001))).is_nan());
    assert_eq!(from_bf16(to_bf16(0.0)), 0.0);
    assert_eq!(
        from_bf16(to_bf16(1e-40)).to_bits() >> 16,
        1e-40f32.to_bits() >> 16
    );
}

#[test]
fn every_engine_gives_the_product_of_the_rounded_inputs_at_every_edge() {
    for engine in engines() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (1, 2, 64),
            (5, 7, 3),
            (6, 64, 64),
            (7, 65, 65),
            (13, 255, 130),
            (97, 300, 129),
            (200, 33, 70),
        ] {
            let a = random(m * k, 1);
            let b = random(k * n, 2);
            check(row_major(&a, m, k), row_major(&b, k, n), engine);
        }
    }
}

#[test]
fn transposed_operands_are_read_through_their_strides() {
    let (m, k, n) = (37, 70, 90);
    let a_t = random(k * m, 3);
    let b_t = random(n * k, 4);
    for engine in engines() {
        // A^T stored as k x m, B^T as n x k: both read transposed.
        check(row_major(&a_t, k, m).t(), row_major(&b_t, n, k).t(), engine);
    }
}

#[test]
fn accumulating_adds_to_what_c_holds() {
    // Whole tiles (summed in place) and edges (through the scratch tile), two chunks of k.
    let (m, k, n) = (13, 300, 130);
    let (a, b) = (random(m * k, 5), random(k * n, 6));
    for engine in engines() {
        let mut once = vec![0f32; m * n];
        gemm(
            row_major(&a, m, k),
            row_major(&b, k, n),
            &mut once,
            false,
            engine,
        )
        .unwrap();
        let mut twice = vec![1f32; m * n];
        gemm(
            row_major(&a, m, k),
            row_major(&b, k, n),
            &mut twice,
            true,
            engine,
        )
        .unwrap();
        for (x, y) in once.iter().zip(&twice) {
            assert!(
                (x + 1.0 - y).abs() <= 1e-5 * (1.0 + x.abs()),
                "{x} + 1 != {y}"
            );
        }
    }
}

#[test]
fn the_rounded_product_is_the_f32_product_within_bf16_rounding() {
    let (m, k, n) = (31, 512, 47);
    let (a, b) = (random(m * k, 7), random(k * n, 8));
    let mut c = vec![0f32; m * n];
    gemm(
        row_major(&a, m, k),
        row_major(&b, k, n),
        &mut c,
        false,
        engine(),
    )
    .unwrap();
    for i in 0..m {
        for j in 0..n {
            let (mut exact, mut scale) = (0f64, 0f64);
            for l in 0..k {
                let p = f64::from(a[i * k + l]) * f64::from(b[l * n + j]);
                exact += p;
                scale += p.abs();
            }
            // Each input off by at most 2^-9 of itself: each product by 2^-8.
            let got = f64::from(c[i * n + j]);
            assert!((got - exact).abs() <= scale / 256.0, "{got} vs {exact}");
        }
    }
}

#[test]
fn shapes_that_do_not_fit_are_an_error_not_a_panic() {
    let a = random(6, 9);
    let b = random(6, 10);
    let mut c = vec![0f32; 4];
    assert!(gemm(
        row_major(&a, 2, 3),
        row_major(&b, 2, 3),
        &mut c,
        false,
        engine()
    )
    .is_err());
    let short = Strided {
        data: &a,
        rows: 3,
        cols: 3,
        row_stride: 3,
        col_stride: 1,
    };
    assert!(gemm(short, row_major(&b, 3, 2), &mut [0f32; 6], false, engine()).is_err());
}

/// The packed weight's product `x W^T + b` against the f64 product of the bf16-rounded
/// operands, on every engine, for the shapes decoding meets: one row to a few hundred, inputs
/// and outputs off every panel and tile edge, a Generator-like width.
#[test]
fn a_packed_weight_multiplies_as_the_rounded_product_on_every_engine() {
    for engine in engines() {
        for (rows, inp, out) in [
            (1, 1, 1),
            (1, 37, 70),
            (5, 64, 64),
            (7, 130, 300),
            (33, 512, 777),
        ] {
            let x = random(rows * inp, 11);
            let w = random(out * inp, 12);
            let bias = random(out, 13);
            let packed = PackedWeight::from_rows(&w, out, inp);
            let y = packed
                .product(row_major(&x, rows, inp), Some(&bias), engine)
                .unwrap();
            let w_t = row_major(&w, out, inp).t();
            let (exact, scale) = reference(row_major(&x, rows, inp), w_t);
            for (i, (&got, (&want, &scale))) in y.iter().zip(exact.iter().zip(&scale)).enumerate() {
                let want = want + f64::from(bias[i % out]);
                let tolerance = 1e-6 * (inp as f64 + 4.0) * (scale + 1.0);
                assert!(
                    (f64::from(got) - want).abs() <= tolerance,
                    "{engine:?} {rows}x{inp}x{out}: element {i} is {got}, wants {want}"
                );
            }
        }
    }
}

#[test]
fn a_packed_weight_gives_back_its_rows_rounded_and_joins_without_rounding_again() {
    let (out, inp) = (70, 37);
    let w = random(out * inp, 14);
    let packed = PackedWeight::from_rows(&w, out, inp);
    let rounded: Vec<f32> = w.iter().map(|&v| from_bf16(to_bf16(v))).collect();
    assert_eq!(packed.unpacked(), rounded);
    assert_eq!(
        packed.row(3, 2.0).unwrap()[..],
        rounded[3 * inp..4 * inp]
            .iter()
            .map(|v| v * 2.0)
            .collect::<Vec<_>>()[..]
    );
    assert!(packed.row(out, 1.0).is_none());
    let other = PackedWeight::from_rows(&w[..10 * inp], 10, inp);
    let joined = PackedWeight::concatenated(&[&packed, &other]);
    assert_eq!(joined.out_features(), out + 10);
    assert_eq!(
        joined.unpacked(),
        [&rounded[..], &rounded[..10 * inp]].concat()
    );
    // Inputs that fit no weight are an error, not a panic.
    let x = random(2 * inp, 15);
    assert!(packed
        .product(row_major(&x, 1, 2 * inp), None, Engine::Emulated)
        .is_err());
    assert!(packed
        .product(row_major(&x, 2, inp), Some(&[0.0; 3]), Engine::Emulated)
        .is_err());
}

#[test]
fn packing_bf16_values_equals_packing_the_floats_they_round_from() {
    for (out, inp) in [(1, 1), (70, 37), (130, 64)] {
        let w = random(out * inp, 16);
        let bits: Vec<u16> = w.iter().map(|&v| to_bf16(v)).collect();
        let from_bits = PackedWeight::from_bf16_rows(&bits, out, inp);
        let from_floats = PackedWeight::from_rows(&w, out, inp);
        assert_eq!(from_bits.unpacked(), from_floats.unpacked());
        assert_eq!(from_bits.bytes(), from_floats.bytes());
    }
}

/// A vocabulary map's restricted Generator: the selected rows, in the asked order (repeats
/// allowed), multiply as the same rows of the whole weight.
#[test]
fn selected_rows_multiply_as_those_rows_of_the_whole_weight() {
    let (out, inp, rows) = (300, 37, 3);
    let w = random(out * inp, 17);
    let packed = PackedWeight::from_rows(&w, out, inp);
    let ids = [0u32, 299, 5, 64, 63, 5, 128, 200];
    let selected = packed.selected_rows(&ids).unwrap();
    assert_eq!(selected.out_features(), ids.len());
    assert_eq!(selected.unpacked(), packed.rows(&ids, 1.0).unwrap());
    let x = random(rows * inp, 18);
    let whole = packed
        .product(row_major(&x, rows, inp), None, Engine::Emulated)
        .unwrap();
    let part = selected
        .product(row_major(&x, rows, inp), None, Engine::Emulated)
        .unwrap();
    for r in 0..rows {
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(part[r * ids.len() + i], whole[r * out + id as usize]);
        }
    }
    assert!(packed.selected_rows(&[300]).is_none());
    assert_eq!(packed.selected_rows(&[]).unwrap().out_features(), 0);
}
