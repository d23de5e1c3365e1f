//! The int8 product checked: every kernel against the plain loop, and the product against
//! the float one within what 8 bits can say.

use super::*;

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Every kernel this CPU has, each on its own layout, gives the plain loop's integer sums
/// exactly, for sizes that are and are not multiples of a register or a block, for tiles
/// of rows full and partial (every count up to two of the largest tiles, so that every tile
/// shape of every kernel runs), and for the extreme values -127 and 127.
#[test]
fn every_kernel_gives_the_plain_integer_sums() {
    let shapes = [(1, 512, 70), (3, 37, 130), (11, 100, 64), (17, 64, 21)];
    let every_tile = (1..=17).map(|rows| (rows, 9 + rows, 41 + 3 * rows));
    for (rows, inp, out) in shapes.into_iter().chain(every_tile) {
        let mut w = values(out * inp, 1);
        w[0] = -5.0; // row 0 reaches -127
        let mut x = values(rows * inp, 2);
        x[1] = 9.0; // row 0 reaches 127
        let plain = QuantizedMatrix::quantize_for(DotKernel::Portable, &w, out, inp);
        for kernel in DotKernel::available() {
            // The plain loop on the input as this kernel quantizes it.
            let inputs = prepared(&x, rows, (inp, plain.stride), kernel);
            let want = integer_dots(&inputs, &plain, 0..out);
            let matrix = QuantizedMatrix::quantize_for(kernel, &w, out, inp);
            assert_eq!(matrix.dequantized(), plain.dequantized(), "{kernel:?}");
            let got = integer_dots(&inputs, &matrix, 3..out);
            let width = out - 3;
            for r in 0..rows {
                assert_eq!(
                    got[r * width..(r + 1) * width],
                    want[r * out + 3..(r + 1) * out],
                    "{kernel:?}, {rows} x {inp} x {out}"
                );
            }
        }
    }
}

/// The int8 product is the float one to within what 8 bits can say: each term is off by at
/// most half a step of either operand.
#[test]
fn the_int8_product_is_the_float_product_within_quantization_error() {
    let (rows, inp, out) = (4, 300, 90);
    let w = values(out * inp, 3);
    let x = values(rows * inp, 4);
    let bias = values(out, 5);
    for kernel in DotKernel::available() {
        let matrix = QuantizedMatrix::quantize_for(kernel, &w, out, inp);
        let y = matrix.product(&x, rows, Some(&bias));
        for r in 0..rows {
            for j in 0..out {
                let exact: f32 = (0..inp)
                    .map(|k| x[r * inp + k] * w[j * inp + k])
                    .sum::<f32>()
                    + bias[j];
                // |x|, |w| <= 1: each product is off by at most (1/127) * 1 (both halves).
                let bound = inp as f32 / 127.0;
                let error = (y[r * out + j] - exact).abs();
                assert!(
                    error < bound * 0.1,
                    "{kernel:?}: {error} at ({r}, {j}), exact {exact}"
                );
            }
        }
        let back = matrix.dequantized();
        assert!(back
            .iter()
            .zip(&w)
            .all(|(a, b)| (a - b).abs() <= 0.5 / 127.0 + 1e-6));
    }
}

/// An input row that overflowed gives NaN, as float32's product would, so that decoding
/// reports damaged weights instead of translating garbage.
#[test]
fn a_row_holding_an_infinity_gives_nan_not_numbers() {
    let matrix = QuantizedMatrix::quantize(&values(8 * 64, 9), 8, 64);
    let mut x = values(2 * 64, 10);
    x[70] = f32::INFINITY;
    let y = matrix.product(&x, 2, None);
    assert!(y[..8].iter().all(|v| v.is_finite()));
    assert!(y[8..].iter().all(|v| v.is_nan()));
}

#[test]
fn concatenated_matrices_multiply_as_their_parts() {
    let (a, b) = (values(20 * 64, 6), values(30 * 64, 7));
    for kernel in DotKernel::available() {
        let (qa, qb) = (
            QuantizedMatrix::quantize_for(kernel, &a, 20, 64),
            QuantizedMatrix::quantize_for(kernel, &b, 30, 64),
        );
        let joined = QuantizedMatrix::concatenated(&[&qa, &qb]);
        let x = values(2 * 64, 8);
        let y = joined.product(&x, 2, None);
        let (ya, yb) = (qa.product(&x, 2, None), qb.product(&x, 2, None));
        for r in 0..2 {
            assert_eq!(
                y[r * 50..r * 50 + 20],
                ya[r * 20..(r + 1) * 20],
                "{kernel:?}"
            );
            assert_eq!(
                y[r * 50 + 20..(r + 1) * 50],
                yb[r * 30..(r + 1) * 30],
                "{kernel:?}"
            );
        }
    }
}

/// A vocabulary map's restricted Generator: the selected rows, in the asked order (repeats
/// allowed), give exactly the same rows' products of the whole matrix, on every kernel.
#[test]
fn selected_rows_multiply_as_those_rows_of_the_whole_matrix() {
    let (out, inp, rows) = (70, 100, 3);
    let w = values(out * inp, 9);
    let ids = [0u32, 69, 5, 16, 15, 5, 33];
    for kernel in DotKernel::available() {
        let whole = QuantizedMatrix::quantize_for(kernel, &w, out, inp);
        let part = whole.selected_rows(&ids).unwrap();
        assert_eq!(part.out_features(), ids.len());
        let x = values(rows * inp, 10);
        let (y_whole, y_part) = (whole.product(&x, rows, None), part.product(&x, rows, None));
        for r in 0..rows {
            for (i, &id) in ids.iter().enumerate() {
                assert_eq!(
                    y_part[r * ids.len() + i],
                    y_whole[r * out + id as usize],
                    "{kernel:?}"
                );
            }
        }
        assert!(whole.selected_rows(&[70]).is_none());
    }
}

/// Products of many rows, where the AMX tiles take them on a CPU that has AMX-INT8 (AVX-512
/// VNNI's registers under a lower cap, which the capped rerun of these tests covers), give
/// the plain loop's sums: rows around the 16- and 32-row tiles, inputs and outputs off the
/// tiles' edges, an odd count of 16-output blocks, and a range that starts inside a block.
#[test]
fn products_of_many_rows_give_the_plain_integer_sums() {
    for (rows, inp, out) in [
        (16, 64, 16),
        (31, 100, 33),
        (32, 512, 130),
        (33, 37, 48),
        (70, 200, 81),
    ] {
        let w = values(out * inp, 6);
        let x = values(rows * inp, 7);
        let plain = QuantizedMatrix::quantize_for(DotKernel::Portable, &w, out, inp);
        for kernel in DotKernel::available() {
            let inputs = prepared(&x, rows, (inp, plain.stride), kernel);
            let matrix = QuantizedMatrix::quantize_for(kernel, &w, out, inp);
            for range in [0..out, 5..out] {
                let want = integer_dots(&inputs, &plain, range.clone());
                let got = integer_dots(&inputs, &matrix, range.clone());
                assert_eq!(got, want, "{kernel:?}, {rows} x {inp} x {out}, {range:?}");
            }
        }
    }
}
