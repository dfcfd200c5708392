//! SET's table of departments, districts and cities (the codes of cDep*, cDis*, cCiu* and the
//! exact descriptions of dDes*), from `vendor/sifen/geography` (see its README).

use std::collections::HashMap;
use std::sync::OnceLock;

/// A place of the table: its name and the code of the place it belongs to (a city's district,
/// a district's department; 0 for a department).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The exact description (`LUQUE`).
    pub name: String,
    /// The code of the enclosing place.
    pub parent: u32,
}

struct Tables {
    departments: HashMap<u32, Place>,
    districts: HashMap<u32, Place>,
    cities: HashMap<u32, Place>,
}

/// `code,"name"[,parent]` lines after a header.
fn read(csv: &str) -> HashMap<u32, Place> {
    csv.lines()
        .skip(1)
        .filter_map(|line| {
            let (code, rest) = line.split_once(',')?;
            let rest = rest.strip_prefix('"')?;
            let (name, parent) = rest.rsplit_once('"')?;
            let parent = parent.trim_start_matches(',').trim();
            Some((
                code.trim().parse().ok()?,
                Place {
                    name: name.replace("\"\"", "\""),
                    parent: if parent.is_empty() {
                        0
                    } else {
                        parent.parse().ok()?
                    },
                },
            ))
        })
        .collect()
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        departments: read(include_str!("../../../vendor/sifen/geography/departments.csv")),
        districts: read(include_str!("../../../vendor/sifen/geography/districts.csv")),
        cities: read(include_str!("../../../vendor/sifen/geography/cities.csv")),
    })
}

/// A department by code.
pub fn department(code: u32) -> Option<&'static Place> {
    tables().departments.get(&code)
}

/// A district by code (its parent is the department).
pub fn district(code: u32) -> Option<&'static Place> {
    tables().districts.get(&code)
}

/// A city by code (its parent is the district).
pub fn city(code: u32) -> Option<&'static Place> {
    tables().cities.get(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_are_whole_and_luque_is_in_central() {
        let t = tables();
        assert_eq!(
            (t.departments.len(), t.districts.len(), t.cities.len()),
            (18, 252, 6414)
        );
        let luque = city(5946).unwrap();
        assert_eq!(luque.name, "LUQUE");
        let district = district(luque.parent).unwrap();
        assert_eq!((luque.parent, district.parent), (159, 12));
        assert_eq!(department(12).unwrap().name, "CENTRAL");
        assert_eq!(city(6).unwrap().name, "AGUARA");
    }
}
