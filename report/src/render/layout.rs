//! The two layouts every chart is drawn in (wide and narrow) and the screen width that picks
//! one: shared by the HTML page and its charts, so that neither chart module depends on the page.

/// The geometry a chart is drawn for: its viewBox width and font size (viewBox units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Layout {
    /// viewBox width.
    pub(super) width: f64,
    /// Font size.
    pub(super) font: f64,
    /// True for the phone layout (fewer labels, taller plots).
    pub(super) narrow: bool,
}

/// Shown on screens wider than [`BREAKPOINT_PX`]: 1000 units over up to 1100 px.
const WIDE: Layout = Layout { width: 1000.0, font: 14.0, narrow: false };
/// Shown on narrower screens: 480 units over 380 to 720 px, so 16 units read as 12.6 px or more.
const NARROW: Layout = Layout { width: 480.0, font: 16.0, narrow: true };
/// The screen width (CSS px) at and below which the narrow charts show.
pub(super) const BREAKPOINT_PX: u32 = 720;

/// A chart drawn for both layouts, each in a box that CSS shows on the screens it fits.
pub(super) fn both(draw: impl Fn(Layout) -> String) -> String {
    format!("<div class=\"chart wide\">{}</div><div class=\"chart narrow\">{}</div>", draw(WIDE), draw(NARROW))
}
