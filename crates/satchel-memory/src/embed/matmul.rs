//! Matrix products through `gemm`, behind bounds-checked views: the one
//! place of this module that calls `unsafe` code.

/// An `rows × cols` matrix inside a slice: element `(r, c)` is at
/// `r * row_stride + c * col_stride`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> View<'a> {
    /// Row-major, rows `row_stride` apart (a row may be a slice of a
    /// wider one).
    pub(crate) fn rows(data: &'a [f32], rows: usize, cols: usize, row_stride: usize) -> Self {
        View {
            data,
            rows,
            cols,
            row_stride,
            col_stride: 1,
        }
    }

    /// The transpose of the row-major `cols × rows` matrix whose rows are
    /// `stride` apart in `data`.
    pub(crate) fn transposed(data: &'a [f32], rows: usize, cols: usize, stride: usize) -> Self {
        View {
            data,
            rows,
            cols,
            row_stride: 1,
            col_stride: stride,
        }
    }

    /// True when every element lies within `data`.
    fn fits(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride
                < self.data.len()
    }
}

/// `dst = scale · lhs · rhs`, or `dst += …` when `accumulate`; `dst` is
/// row-major with rows `dst_stride` apart.
///
/// Panics if the shapes disagree or a matrix runs past its slice.
pub(crate) fn product(
    lhs: View<'_>,
    rhs: View<'_>,
    dst: &mut [f32],
    dst_stride: usize,
    scale: f32,
    accumulate: bool,
) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    let out = View::rows(dst, m, n, dst_stride);
    assert!(
        rhs.rows == k && lhs.fits() && rhs.fits() && out.fits(),
        "matrix product out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: all three matrices lie within their slices (checked above,
    // with the strides passed here); dst is borrowed mutably, so neither
    // operand overlaps it. gemm reads dst only when `accumulate`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_stride as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr(),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            1.0f32,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplies_strided_views() {
        // lhs 2×3 inside rows 4 wide; rhs = transpose of a 2×3 matrix.
        let lhs = [1.0, 2.0, 3.0, 99.0, 4.0, 5.0, 6.0, 99.0];
        let rhs = [1.0, 0.0, -1.0, 2.0, 1.0, 0.0];
        let mut dst = [10.0; 4];
        product(
            View::rows(&lhs, 2, 3, 4),
            View::transposed(&rhs, 3, 2, 3),
            &mut dst,
            2,
            2.0,
            true,
        );
        assert_eq!(dst, [10.0 - 4.0, 10.0 + 8.0, 10.0 - 4.0, 10.0 + 26.0]);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn refuses_a_view_past_its_slice() {
        let mut dst = [0.0; 4];
        product(
            View::rows(&[1.0; 5], 2, 3, 3),
            View::rows(&[1.0; 6], 3, 2, 2),
            &mut dst,
            2,
            1.0,
            false,
        );
    }
}
