//! The attribute look box of the window: which transfer-function presets it offers, and
//! what it says an attribute shows (the preset chosen, else the scene's look by its
//! colormap, never a stale preset name).

use crate::app::Player;
use crate::render::{Colormap, TransferFunction};

/// Transfer-function presets offered per attribute.
pub const PRESETS: [&str; 6] = [
    "cloud",
    "rain",
    "wind_speed",
    "vorticity",
    "vertical_velocity",
    "grey",
];

/// The preset state each of `player`'s attributes starts with: none chosen, each showing
/// the look its scene gave it.
pub fn presets_for(player: &Player) -> Vec<Option<usize>> {
    vec![None; player.attribute_names().len()]
}

/// What an attribute's look box says: the preset chosen in the window, else the scene's
/// look by its colormap ("scene: cloud"), never a preset the attribute does not show.
pub fn look_label(chosen: Option<usize>, tf: &TransferFunction) -> String {
    match chosen.and_then(|k| PRESETS.get(k)) {
        Some(name) => (*name).to_string(),
        None => match &tf.colormap {
            Colormap::Named(n) => format!("scene: {n}"),
            Colormap::Stops(_) => "scene: custom colours".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_names_the_look_in_use() {
        // The storm scene's funnel grid shows the cloud look: the box said "grey" (the
        // preset matched by name, of which there is none for funnel_cloud).
        let funnel = TransferFunction::preset("funnel_cloud", [0.0, 1.0], 1000.0);
        assert_eq!(look_label(None, &funnel), "scene: cloud");
        let reflectivity = TransferFunction::preset("reflectivity", [5.0, 75.0], 1000.0);
        assert_eq!(look_label(None, &reflectivity), "scene: nws_reflectivity");
        // A preset picked in the window is named as such.
        assert_eq!(look_label(Some(1), &funnel), "rain");
        let mut stops = funnel.clone();
        stops.colormap = Colormap::Stops(vec![(0.0, [0.0; 3]), (1.0, [1.0; 3])]);
        assert_eq!(look_label(None, &stops), "scene: custom colours");
        assert_eq!(
            look_label(Some(PRESETS.len()), &stops),
            "scene: custom colours"
        );
    }
}
