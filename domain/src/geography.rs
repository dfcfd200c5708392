//! SET's geographic codes: the departments, districts and cities SIFEN names in `cDep*`, `cDis*`
//! and `cCiu*` and describes in `dDesDep*`, `dDesDis*` and `dDesCiu*` (the issuer's address, the
//! receiver's, the remisión's departure and delivery places, the autofactura seller's).
//!
//! The tables are SET's "Tabla de Departamentos, Distritos y Ciudades", vendored in
//! `vendor/sifen/geography/` (see its README for the source) and compiled in: no IO, parsed once
//! on first use. A city belongs to one district and a district to one department; SIFEN refuses a
//! DE whose codes do not exist, do not agree, or whose descriptions are not the table's exact
//! names (rules 1255–1259, 1328, 1329, 2206, 2208, 2553–2559). Start at [`resolve`]: codes in,
//! the three names (and the city's district) out, or a [`PlaceError`] that says what disagrees.
//!
//! Names are compared with [`same_name`] (blanks around, case and accents do not count), but what
//! a document carries is always the table's exact name: a caller who writes `Asunción` for a
//! city the table calls `ASUNCION (DISTRITO)` is told the table's name, never silently accepted.
//!
//! Rejected: the XSD's list of 20 departments (it has 19 CHACO and 20 NUEVA ASUNCION, which no
//! district of the table belongs to, so no city could ever agree with them).

use std::collections::BTreeMap;
use std::sync::LazyLock;

/// A department (`cDep*`, `dDesDep*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Department {
    /// Its code, 1–18.
    pub code: u16,
    /// Its name, as SET writes it (`CENTRAL`, `PTE. HAYES`).
    pub name: String,
}

/// A district (`cDis*`, `dDesDis*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct District {
    /// Its code.
    pub code: u16,
    /// Its name, as SET writes it (at most 30 characters).
    pub name: String,
    /// The department it belongs to.
    pub department: u16,
}

/// A city (`cCiu*`, `dDesCiu*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct City {
    /// Its code.
    pub code: u32,
    /// Its name, as SET writes it (at most 30 characters).
    pub name: String,
    /// The district it belongs to.
    pub district: u16,
}

/// The three tables by code.
struct Tables {
    departments: BTreeMap<u16, Department>,
    districts: BTreeMap<u16, District>,
    cities: BTreeMap<u32, City>,
}

static TABLES: LazyLock<Tables> = LazyLock::new(|| Tables {
    departments: rows::<u16, u16>(include_str!("../../vendor/sifen/geography/departments.csv"))
        .map(|(code, name, _)| (code, Department { code, name }))
        .collect(),
    districts: rows(include_str!("../../vendor/sifen/geography/districts.csv"))
        .map(|(code, name, department)| {
            (
                code,
                District {
                    code,
                    name,
                    department: department.unwrap_or(0),
                },
            )
        })
        .collect(),
    cities: rows(include_str!("../../vendor/sifen/geography/cities.csv"))
        .map(|(code, name, district)| {
            (
                code,
                City {
                    code,
                    name,
                    district: district.unwrap_or(0),
                },
            )
        })
        .collect(),
});

/// The rows of a vendored table: `code,"name"[,parent]`, a header first, `""` for a quote inside
/// the name. The files are compiled in and a test reads every row, so a malformed one is a bug
/// of the vendored copy: it panics on first use rather than losing a city quietly.
fn rows<C, P>(csv: &'static str) -> impl Iterator<Item = (C, String, Option<P>)>
where
    C: std::str::FromStr,
    P: std::str::FromStr,
{
    csv.lines().skip(1).filter(|l| !l.trim().is_empty()).map(|line| {
        let (code, rest) = line.split_once(',').unwrap_or_else(|| malformed(line));
        let rest = rest.strip_prefix('"').unwrap_or_else(|| malformed(line));
        let mut name = String::new();
        let mut chars = rest.char_indices();
        let after = loop {
            match chars.next() {
                Some((i, '"')) => {
                    if rest[i + 1..].starts_with('"') {
                        name.push('"');
                        chars.next();
                    } else {
                        break &rest[i + 1..];
                    }
                }
                Some((_, c)) => name.push(c),
                None => malformed(line),
            }
        };
        let parent = match after {
            "" => None,
            more => Some(
                more.strip_prefix(',')
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or_else(|| malformed(line)),
            ),
        };
        (
            code.trim().parse().unwrap_or_else(|_| malformed(line)),
            name,
            parent,
        )
    })
}

fn malformed(line: &str) -> ! {
    panic!("vendor/sifen/geography: malformed row {line:?}")
}

/// Department `code`, if SET's table has it.
pub fn department(code: u16) -> Option<&'static Department> {
    TABLES.departments.get(&code)
}

/// District `code`, if SET's table has it.
pub fn district(code: u16) -> Option<&'static District> {
    TABLES.districts.get(&code)
}

/// City `code`, if SET's table has it.
pub fn city(code: u32) -> Option<&'static City> {
    TABLES.cities.get(&code)
}

/// Every department, by code (the console's choice of a place).
pub fn departments() -> impl Iterator<Item = &'static Department> {
    TABLES.departments.values()
}

/// The districts of department `code`, by name.
pub fn districts_of(code: u16) -> Vec<&'static District> {
    let mut found: Vec<_> = TABLES
        .districts
        .values()
        .filter(|d| d.department == code)
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The cities of district `code`, by name.
pub fn cities_of(code: u16) -> Vec<&'static City> {
    let mut found: Vec<_> = TABLES.cities.values().filter(|c| c.district == code).collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// A place whose department, district and city agree: what the DE writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The department.
    pub department: &'static Department,
    /// The city's district (given or derived from the city).
    pub district: &'static District,
    /// The city.
    pub city: &'static City,
}

/// Why codes do not make a place. Each names the code that is wrong and, where there is one, the
/// right value, so a message can tell the caller what to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    /// No such department.
    #[error("department {0} is not in SET's table of departments (1 to 18)")]
    UnknownDepartment(u16),
    /// No such district.
    #[error("district {0} is not in SET's table of districts")]
    UnknownDistrict(u16),
    /// No such city.
    #[error("city {0} is not in SET's table of cities")]
    UnknownCity(u32),
    /// The city is in another department.
    #[error(
        "city {} ({}) is in department {} {}, not in department {given}",
        .city.code, .city.name, .department.code, .department.name
    )]
    CityNotInDepartment {
        /// The city.
        city: &'static City,
        /// The department given.
        given: u16,
        /// The city's department.
        department: &'static Department,
    },
    /// The city is in another district.
    #[error(
        "city {} ({}) is in district {} {}, not in district {given}",
        .city.code, .city.name, .district.code, .district.name
    )]
    CityNotInDistrict {
        /// The city.
        city: &'static City,
        /// The district given.
        given: u16,
        /// The city's district.
        district: &'static District,
    },
}

/// The place of department `department`, district `district` (derived from the city when `None`)
/// and city `city`, or the first thing that disagrees: an unknown city (the other two follow from
/// it), then an unknown district or a city outside it, then a city outside the department.
pub fn resolve(department: u16, district: Option<u16>, city: u32) -> Result<Place, PlaceError> {
    let city = self::city(city).ok_or(PlaceError::UnknownCity(city))?;
    let city_district = self::district(city.district).ok_or(PlaceError::UnknownDistrict(city.district))?;
    let city_department = self::department(city_district.department)
        .ok_or(PlaceError::UnknownDepartment(city_district.department))?;
    if let Some(given) = district {
        self::district(given).ok_or(PlaceError::UnknownDistrict(given))?;
        if given != city_district.code {
            return Err(PlaceError::CityNotInDistrict {
                city,
                given,
                district: city_district,
            });
        }
    }
    // A department that is not the city's is named as such, whether or not it exists: the
    // caller learns the right one either way.
    if department != city_department.code {
        return Err(PlaceError::CityNotInDepartment {
            city,
            given: department,
            department: city_department,
        });
    }
    Ok(Place {
        department: city_department,
        district: city_district,
        city,
    })
}

/// Whether `given` names what the table calls `table`: equal once blanks around and between
/// words, case and accents (`á` → `a`, `ñ` → `n`, `ü` → `u`) are set aside.
pub fn same_name(given: &str, table: &str) -> bool {
    fold(given) == fold(table)
}

fn fold(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for word in name.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_uppercase).map(|c| match c {
            'Á' | 'À' | 'Â' | 'Ä' => 'A',
            'É' | 'È' | 'Ê' | 'Ë' => 'E',
            'Í' | 'Ì' | 'Î' | 'Ï' => 'I',
            'Ó' | 'Ò' | 'Ô' | 'Ö' => 'O',
            'Ú' | 'Ù' | 'Û' | 'Ü' => 'U',
            'Ñ' => 'N',
            other => other,
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_tables_are_read_whole_and_every_parent_exists() {
        assert_eq!(TABLES.departments.len(), 18);
        assert_eq!(TABLES.districts.len(), 252);
        assert_eq!(TABLES.cities.len(), 6414);
        for d in TABLES.districts.values() {
            assert!(department(d.department).is_some(), "district {}", d.code);
        }
        for c in TABLES.cities.values() {
            assert!(district(c.district).is_some(), "city {}", c.code);
            assert!((1..=30).contains(&c.name.chars().count()), "city {}", c.code);
            assert_eq!(c.name, c.name.trim(), "city {}", c.code);
        }
    }

    #[test]
    fn doubled_quotes_in_a_name_are_one_quote() {
        assert_eq!(
            city(6329).map(|c| c.name.as_str()),
            Some(r#""COL.PARANA "A" (CALLE)""#)
        );
        assert_eq!(
            city(5821).map(|c| c.name.as_str()),
            Some(r#"CABAÑA "LA CHIQUILLA""#)
        );
    }

    #[test]
    fn luque_is_city_5946_in_district_159_in_central() {
        let place = resolve(12, None, 5946).expect("Luque");
        assert_eq!(place.city.name, "LUQUE");
        assert_eq!(
            (place.district.code, place.district.name.as_str()),
            (159, "LUQUE")
        );
        assert_eq!(
            (place.department.code, place.department.name.as_str()),
            (12, "CENTRAL")
        );
        assert_eq!(resolve(12, Some(159), 5946), Ok(place));
    }

    #[test]
    fn the_listings_hold_each_district_and_city_under_its_parent_once() {
        assert_eq!(departments().count(), TABLES.departments.len());
        let districts: usize = departments().map(|d| districts_of(d.code).len()).sum();
        assert_eq!(districts, TABLES.districts.len());
        let central = districts_of(12);
        assert!(central.iter().any(|d| d.code == 159 && d.name == "LUQUE"));
        assert!(central.windows(2).all(|w| w[0].name <= w[1].name), "by name");
        let cities: usize = TABLES.districts.keys().map(|d| cities_of(*d).len()).sum();
        assert_eq!(cities, TABLES.cities.len());
        assert!(cities_of(159).iter().any(|c| c.code == 5946));
    }

    #[test]
    fn asuncion_is_city_1_in_district_1_in_the_capital() {
        let place = resolve(1, Some(1), 1).expect("Asunción");
        assert_eq!(place.city.name, "ASUNCION (DISTRITO)");
        assert_eq!(place.district.name, "ASUNCION (DISTRITO)");
        assert_eq!(place.department.name, "CAPITAL");
    }

    #[test]
    fn city_6_is_aguara_in_concepcion_so_department_11_disagrees() {
        let aguara = resolve(2, None, 6).expect("Aguara");
        assert_eq!(aguara.city.name, "AGUARA");
        assert_eq!(aguara.department.name, "CONCEPCION");
        let err = resolve(11, None, 6).expect_err("city 6 is not in Alto Paraná");
        assert!(
            matches!(&err, PlaceError::CityNotInDepartment { given: 11, department, .. } if department.code == 2)
        );
        assert_eq!(
            err.to_string(),
            "city 6 (AGUARA) is in department 2 CONCEPCION, not in department 11"
        );
    }

    #[test]
    fn unknown_codes_and_a_foreign_district_are_named() {
        assert_eq!(resolve(1, None, 99_999), Err(PlaceError::UnknownCity(99_999)));
        assert!(matches!(
            resolve(19, None, 1),
            Err(PlaceError::CityNotInDepartment { given: 19, department, .. }) if department.code == 1
        ));
        assert_eq!(resolve(1, Some(9999), 1), Err(PlaceError::UnknownDistrict(9999)));
        assert!(matches!(
            resolve(12, Some(1), 5946),
            Err(PlaceError::CityNotInDistrict { given: 1, district, .. }) if district.code == 159
        ));
    }

    #[test]
    fn names_compare_without_case_accents_or_extra_blanks() {
        assert!(same_name(" Asunción (distrito) ", "ASUNCION (DISTRITO)"));
        assert!(same_name("ñemby", "ÑEMBY"));
        assert!(same_name("Ciudad  del Este", "CIUDAD DEL ESTE"));
        assert!(!same_name("LUQUE", "AGUARA"));
        assert!(!same_name("ASUNCION", "ASUNCION (DISTRITO)"));
    }
}
