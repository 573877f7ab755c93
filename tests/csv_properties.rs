//! Property tests of the CSV ingest: any table of finite numbers, written with any mix of
//! quoting, line endings, blank lines and padding, reads back bit-exactly; a bad cell
//! anywhere is reported at the physical line it is on.

use mercer::dataset::csv::{ingest, CsvOptions};
use mercer::dataset::format::read_dataset;
use mercer::dataset::{IngestError, Targets};
use proptest::prelude::*;

/// How one table is written out.
#[derive(Debug, Clone)]
struct Style {
    crlf: bool,
    /// Per row: blank lines before it, whether its cells are quoted, padded.
    rows: Vec<(usize, bool, bool)>,
}

fn write(values: &[Vec<f64>], style: &Style) -> (String, Vec<usize>) {
    let eol = if style.crlf { "\r\n" } else { "\n" };
    let d = values[0].len();
    let mut text: String = (0..d).map(|j| format!("c{j}")).collect::<Vec<_>>().join(",") + eol;
    let mut line = 1;
    let mut lines = Vec::new();
    for (row, &(blanks, quoted, padded)) in values.iter().zip(&style.rows) {
        for _ in 0..blanks {
            text.push_str(eol);
            line += 1;
        }
        line += 1;
        lines.push(line);
        let cells: Vec<String> = row
            .iter()
            .map(|v| {
                let s = format!("{v:?}");
                let s = if padded { format!(" {s} ") } else { s };
                if quoted {
                    format!("\"{s}\"")
                } else {
                    s
                }
            })
            .collect();
        text.push_str(&cells.join(","));
        text.push_str(eol);
    }
    (text, lines)
}

fn table() -> impl Strategy<Value = (Vec<Vec<f64>>, Style)> {
    (2usize..5, 1usize..12).prop_flat_map(|(d, n)| {
        let cell = prop_oneof![any::<f64>().prop_filter("finite", |v| v.is_finite()), -1e3f64..1e3];
        (
            prop::collection::vec(prop::collection::vec(cell, d), n),
            any::<bool>(),
            prop::collection::vec((0usize..3, any::<bool>(), any::<bool>()), n),
        )
            .prop_map(|(values, crlf, rows)| (values, Style { crlf, rows }))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, rng_seed: proptest::test_runner::RngSeed::Fixed(13), ..ProptestConfig::default() })]

    #[test]
    fn tables_read_back_bit_exactly((values, style) in table()) {
        let (text, _) = write(&values, &style);
        let (info, bytes) = ingest(text.as_bytes(), Vec::new(), CsvOptions::default()).unwrap();
        let back = read_dataset(&bytes[..], bytes.len() as u64).unwrap();
        let d = values[0].len();
        prop_assert_eq!(info.n_rows as usize, values.len());
        for (i, row) in values.iter().enumerate() {
            for (got, want) in back.x.point(i).iter().zip(&row[..d - 1]) {
                prop_assert_eq!(got.to_bits(), want.to_bits());
            }
        }
        let Targets::Numeric(y) = back.y else { panic!("a numeric target") };
        prop_assert!(y.iter().zip(&values).all(|(a, r)| a.to_bits() == r[d - 1].to_bits()));
    }

    #[test]
    fn a_bad_cell_is_reported_on_its_physical_line((values, style) in table(), at in any::<prop::sample::Index>(), col in any::<prop::sample::Index>()) {
        let (text, lines) = write(&values, &style);
        let row = at.index(values.len());
        let eol = if style.crlf { "\r\n" } else { "\n" };
        // Replace one feature cell of `row` (its line is lines[row]) with a word.
        let mut out: Vec<String> = text.split(eol).map(String::from).collect();
        let line = lines[row];
        let mut cells: Vec<String> = out[line - 1].split(',').map(String::from).collect();
        let j = col.index(cells.len() - 1);
        cells[j] = "oops".into();
        out[line - 1] = cells.join(",");
        let bad = out.join(eol);
        match ingest(bad.as_bytes(), Vec::new(), CsvOptions::default()) {
            Err(IngestError::Invalid { pointer, message }) => {
                prop_assert_eq!(pointer, format!("/line/{line}"));
                prop_assert!(message.contains(&format!("`c{j}`")), "{}", message);
            }
            other => prop_assert!(false, "expected a 422, got {:?}", other.map(|r| r.0)),
        }
    }
}
