//! The types of a workflow's steps, as definitions and events name them.

/// The seven step types of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepType {
    #[serde(rename = "andThen")]
    Then,
    #[serde(rename = "andWhen")]
    When,
    #[serde(rename = "andAll")]
    All,
    #[serde(rename = "andRace")]
    Race,
    #[serde(rename = "andTap")]
    Tap,
    #[serde(rename = "andAgent")]
    Agent,
    #[serde(rename = "andWorkflow")]
    Workflow,
    /// `andForEach`, whose wire name is `foreach`.
    #[serde(rename = "foreach")]
    ForEach,
}

impl StepType {
    /// The wire name (`andThen`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StepType::Then => "andThen",
            StepType::When => "andWhen",
            StepType::All => "andAll",
            StepType::Race => "andRace",
            StepType::Tap => "andTap",
            StepType::Agent => "andAgent",
            StepType::Workflow => "andWorkflow",
            StepType::ForEach => "foreach",
        }
    }
}
