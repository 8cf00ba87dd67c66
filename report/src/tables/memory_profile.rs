//! `xlens memory`'s runtime memory profile: per host, each allocator's peak, stack, heap, free
//! memory, fragmentation and capacity at its peak (XProf's `memory_profile` tool), and which
//! allocator XProf's `get_memory_profile` reports, as text and JSON.

use serde_json::{Value, json};
use xlens_roofline::memory_profile::{AllocatorProfile, MemoryProfile};

use super::line;

/// One host's runtime memory profile.
#[derive(Clone, Debug)]
pub struct HostMemoryProfile {
    /// The host.
    pub host: String,
    /// Its allocators.
    pub profile: MemoryProfile,
}

const GIB: f64 = (1u64 << 30) as f64;

/// A fraction as a percentage; `null` when it is not a number (an allocator that found no free
/// memory writes `NaN`).
fn pct(fraction: f64) -> Value {
    if fraction.is_finite() { json!(100.0 * fraction) } else { Value::Null }
}

/// `part` of `whole` in %; `null` when `whole` is not positive.
fn share(part: i64, whole: i64) -> Value {
    if whole > 0 { json!(100.0 * part as f64 / whole as f64) } else { Value::Null }
}

fn allocator_json(a: &AllocatorProfile) -> Value {
    let peak = a.peak.unwrap_or_default();
    json!({
        "memory_id": a.memory_id,
        "peak_bytes_in_use": a.peak.map(|_| a.peak_in_use_bytes()),
        "stack_reserved_bytes": a.peak.map(|_| peak.stack_reserved_bytes),
        "heap_allocated_bytes": a.peak.map(|_| peak.heap_allocated_bytes),
        "free_memory_bytes": a.peak.map(|_| peak.free_memory_bytes),
        "capacity_bytes": a.peak.map(|_| a.capacity_bytes()),
        "utilization_pct": share(a.peak_in_use_bytes(), a.capacity_bytes()),
        "fragmentation_pct": a.peak.map_or(Value::Null, |p| pct(p.fragmentation)),
        "peak_time_offset_ps": a.peak.map(|_| a.peak_time_offset_ps),
        "peak_bytes_lifetime": a.peak_bytes_lifetime,
        "allocations": a.allocations,
        "deallocations": a.deallocations,
    })
}

/// One host's entry of [`memory_profile_json`].
fn host_json(h: &HostMemoryProfile) -> Value {
    let p = &h.profile;
    let peak = p.peak_allocator();
    let mut doc = json!({
        "host": h.host,
        "memory_ids": p.allocators.iter().map(|a| a.memory_id.as_str()).collect::<Vec<_>>(),
        "peak_memory_id": peak.map(|a| a.memory_id.as_str()),
        "allocators": p.allocators.iter().map(allocator_json).collect::<Vec<_>>(),
        "xprof_memory_capacity_bytes": p.largest_capacity_bytes(),
        "xprof_utilization_pct": match (peak, p.largest_capacity_bytes()) {
            (Some(a), Some(c)) => share(a.peak_in_use_bytes(), c),
            _ => Value::Null,
        },
    });
    if let (Some(why), Value::Object(map)) = (p.absence(), &mut doc) {
        map.insert("reason".to_owned(), json!(why.to_string()));
    }
    if p.events_beyond_limit > 0
        && let Value::Object(map) = &mut doc
    {
        map.insert("events_beyond_limit".to_owned(), json!(p.events_beyond_limit));
    }
    doc
}

/// The `memory_profile` entry of `memory --json`: one object per host, `{"host", "memory_ids",
/// "peak_memory_id", "allocators": [{"memory_id", "peak_bytes_in_use", "stack_reserved_bytes",
/// "heap_allocated_bytes", "free_memory_bytes", "capacity_bytes", "utilization_pct",
/// "fragmentation_pct", "peak_time_offset_ps", "peak_bytes_lifetime", "allocations",
/// "deallocations"}], "xprof_memory_capacity_bytes", "xprof_utilization_pct"}`, and `"reason"`
/// with `peak_memory_id: null` where the host has no memory profile. Each allocator's figures
/// are at its own peak; `peak_memory_id` is the allocator `get_memory_profile` reports (the
/// largest peak), and the `xprof_` figures are its capacity and utilisation, taken over the
/// largest capacity of any allocator as XProf takes them.
pub fn memory_profile_json(hosts: &[HostMemoryProfile]) -> Value {
    Value::Array(hosts.iter().map(host_json).collect())
}

fn gib(bytes: i64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB)
}

/// The runtime memory profile as text: per host, each allocator at its peak.
pub fn memory_profile_text(hosts: &[HostMemoryProfile]) -> String {
    let mut out = String::new();
    line(&mut out, format_args!("Runtime memory profile (allocator events)"));
    for h in hosts {
        let p = &h.profile;
        if let Some(why) = p.absence() {
            line(&mut out, format_args!("  {}: none ({why})", h.host));
            continue;
        }
        let peak = p.peak_allocator().map_or("", |a| a.memory_id.as_str());
        for a in &p.allocators {
            let Some(s) = a.peak else { continue };
            let frag = if s.fragmentation.is_finite() {
                format!("{:.1} %", 100.0 * s.fragmentation)
            } else {
                "unknown".to_owned()
            };
            line(
                &mut out,
                format_args!(
                    "  {}: {}{}  peak {} of {} (stack {}, heap {}, free {}), fragmentation {frag}",
                    h.host,
                    a.memory_id,
                    if a.memory_id == peak { " (largest)" } else { "" },
                    gib(a.peak_in_use_bytes()),
                    gib(a.capacity_bytes()),
                    gib(s.stack_reserved_bytes),
                    gib(s.heap_allocated_bytes),
                    gib(s.free_memory_bytes),
                ),
            );
        }
    }
    out
}
