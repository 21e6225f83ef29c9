//! The attribute look box of the window: which transfer-function presets it offers, and
//! what it says an attribute shows (the preset chosen, a look edited in the transfer
//! panel, else the scene's look, each by its colormap; never a stale preset name).

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

/// What an attribute's look box says: the preset chosen in the window; else a look edited
/// in the transfer panel (`edited`) by its colormap ("edited: turbo"); else the scene's
/// look by its colormap ("scene: cloud"); never a preset the attribute does not show.
pub fn look_label(chosen: Option<usize>, edited: bool, tf: &TransferFunction) -> String {
    if let Some(name) = chosen.and_then(|k| PRESETS.get(k)) {
        return (*name).to_string();
    }
    let whose = if edited { "edited" } else { "scene" };
    match &tf.colormap {
        Colormap::Named(n) => format!("{whose}: {n}"),
        Colormap::Stops(_) => format!("{whose}: custom colours"),
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
        assert_eq!(look_label(None, false, &funnel), "scene: cloud");
        let reflectivity = TransferFunction::preset("reflectivity", [5.0, 75.0], 1000.0);
        assert_eq!(
            look_label(None, false, &reflectivity),
            "scene: nws_reflectivity"
        );
        // A preset picked in the window is named as such.
        assert_eq!(look_label(Some(1), false, &funnel), "rain");
        let mut stops = funnel.clone();
        stops.colormap = Colormap::Stops(vec![(0.0, [0.0; 3]), (1.0, [1.0; 3])]);
        assert_eq!(look_label(None, false, &stops), "scene: custom colours");
        assert_eq!(
            look_label(Some(PRESETS.len()), false, &stops),
            "scene: custom colours"
        );
        // A look edited in the panel is named by the colormap it shows now, whatever
        // preset was picked before the edit (an edit clears the pick).
        let mut turbo = funnel.clone();
        turbo.colormap = Colormap::Named("turbo".into());
        assert_eq!(look_label(None, true, &turbo), "edited: turbo");
        assert_eq!(look_label(None, true, &stops), "edited: custom colours");
        assert_eq!(look_label(Some(0), true, &funnel), "cloud");
    }
}
