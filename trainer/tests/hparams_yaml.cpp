// Saved hyperparameters: CSVLogger's hparams.yaml nested as Lightning's
// CSVLogger writes it with PyYAML (checked against PyYAML itself when
// /usr/bin/python3 has it), hparams.json, and numbers that read back as the
// same double in hparams.yaml, the checkpoints' "hyper_parameters" and
// job_to_json.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

#include <jansson.h>

#include <cstdlib>

using namespace trainer_test;

namespace {

// Nested sections, lists (of mappings, of lists, empty), strings that YAML
// would read as something else, floats, integers, booleans and null.
const char *kParams = R"({
  "optimizer": {"name": "adamw", "lr": 0.001, "betas": [0.9, 0.999], "amsgrad": false, "steps": 3,
                "decay": 1e-05, "scale": 1.0, "big": 1e+300},
  "model": {"layers": [{"type": "linear", "out_features": 4}, {"type": "relu"}], "empty": []},
  "grid": [[1, 2], [3]],
  "notes": "a: b", "quote": "it's", "number": "0.001", "yes": "yes", "path": "data/x.npy", "empty": "",
  "multi": "a\nb", "none": null, "nested": {"deep": {"k": -1, "on": true}}, "empty_map": {}
})";

const char *kYaml = R"(empty: ''
empty_map: {}
grid:
- - 1
  - 2
- - 3
model:
  empty: []
  layers:
  - out_features: 4
    type: linear
  - type: relu
multi: "a\nb"
nested:
  deep:
    k: -1
    'on': true
none: null
notes: 'a: b'
number: '0.001'
optimizer:
  amsgrad: false
  betas:
  - 0.9
  - 0.999
  big: 1.0e+300
  decay: 1.0e-05
  lr: 0.001
  name: adamw
  scale: 1.0
  steps: 3
path: data/x.npy
quote: 'it''s'
'yes': 'yes'
)";

const double kLr = 0.00123456789012345;

hpu::ModelSpec spec() {
  hpu::ModelSpec s;
  s.layers = {{.type = "linear", .in_features = 16, .out_features = 8},
              {.type = "relu"},
              {.type = "linear", .in_features = 8, .out_features = 4}};
  s.optimizer = adamw(kLr);
  s.optimizer.weight_decay = 0.0123456789012345678;
  s.optimizer.no_weight_decay = {"bias"};
  return s;
}

bool python_has_yaml() { return std::system("/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1") == 0; }

double lr_in(const std::string &hyperparameters) {
  json_error_t err;
  json_t *j = json_loads(hyperparameters.c_str(), 0, &err);
  EXPECT_TRUE(j) << err.text;
  const double lr = json_number_value(json_object_get(json_object_get(j, "optimizer"), "lr"));
  json_decref(j);
  return lr;
}

}  // namespace

TEST(HparamsYaml, NestedAsPyYamlWritesThem) {
  TempDir dir;
  hpu::CSVLogger log(dir.path());
  log.log_hyperparams(kParams);
  EXPECT_EQ(slurp(log.log_dir() + "/hparams.yaml"), kYaml);
  log.log_hyperparams("{}");
  EXPECT_EQ(slurp(log.log_dir() + "/hparams.yaml"), "{}\n");
  EXPECT_HPU_ERROR(log.log_hyperparams("[1]"), HPU_ERROR_INVALID_ARGUMENT, "the hyperparameters: expected a JSON object");
}

TEST(HparamsYaml, HparamsJsonIsTheNestedObject) {
  TempDir dir;
  hpu::JsonLinesLogger log(dir.path());
  log.log_hyperparams(R"({"optimizer": {"lr": 0.001, "name": "adamw"}, "batch_size": 256})");
  EXPECT_EQ(slurp(log.log_dir() + "/hparams.json"),
            "{\n  \"batch_size\": 256,\n  \"optimizer\": {\n    \"lr\": 0.001,\n    \"name\": \"adamw\"\n  }\n}\n");
}

// PyYAML reads hparams.yaml back as the JSON it came from (floats compared
// exactly), and a fit's hparams.yaml is the text yaml.dump gives for it.
TEST(HparamsYaml, PyYamlReadsItBackAndWritesTheSameText) {
  if (!python_has_yaml()) GTEST_SKIP() << "/usr/bin/python3 has no yaml (Debian: python3-yaml); not cross-checked";
  TempDir dir;
  hpu::CSVLogger log(dir.path(), "given");
  log.log_hyperparams(kParams);
  spit(dir / "given.json", kParams);

  hpu::TrainerOptions o = silent_run(dir.path());
  o.logger = hpu::CSVLogger(dir.path(), "fit");
  o.max_epochs = 1;
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data(32);
  hpu::Classifier model(spec());
  t.fit(model, data);
  spit(dir / "fit.json", model.hyperparameters());

  spit(dir / "check.py",
       "import json, sys, yaml\n"
       "for name, folder in (('given', sys.argv[1] + '/given'), ('fit', sys.argv[1] + '/fit')):\n"
       "    text = open(folder + '/version_0/hparams.yaml').read()\n"
       "    want = json.load(open(sys.argv[1] + '/' + name + '.json'))\n"
       "    got = yaml.safe_load(text)\n"
       "    assert got == want, (name, got, want)\n"
       "    if name == 'fit':\n"
       "        assert yaml.dump(want) == text, (yaml.dump(want), text)\n"
       "        assert got['optimizer']['lr'] == 0.00123456789012345\n");
  EXPECT_EQ(std::system(("/usr/bin/python3 " + (dir / "check.py") + " " + dir.path()).c_str()), 0);
}

// An lr with 15 significant digits comes back bit-equal from hparams.yaml,
// the checkpoint's hyper_parameters, load_from_checkpoint and job_to_json.
TEST(HparamsYaml, FloatsReadBackAsTheSameDouble) {
  TempDir dir;
  hpu::TrainerOptions o = silent_run(dir.path());
  o.logger = hpu::CSVLogger(dir.path());
  o.max_epochs = 1;
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data(32);
  hpu::Classifier model(spec());
  t.fit(model, data);
  EXPECT_EQ(lr_in(model.hyperparameters()), kLr);
  const std::string yaml = slurp(t.log_dir() + "/hparams.yaml");
  EXPECT_NE(yaml.find("\n  lr: 0.00123456789012345\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\n  weight_decay: 0.012345678901234568\n"), std::string::npos) << yaml;

  const std::string ckpt = dir / "m.ckpt";
  t.save_checkpoint(ckpt);
  json_error_t err;
  json_t *meta = json_loads(hpu::load_checkpoint_file(ckpt).meta.c_str(), 0, &err);
  ASSERT_TRUE(meta) << err.text;
  json_t *opt = json_object_get(json_object_get(meta, "hyper_parameters"), "optimizer");
  EXPECT_EQ(json_number_value(json_object_get(opt, "lr")), kLr);
  EXPECT_EQ(json_number_value(json_object_get(opt, "weight_decay")), 0.0123456789012345678);
  json_decref(meta);
  hpu::Device dev(0);
  EXPECT_EQ(lr_in(hpu::Classifier::load_from_checkpoint(ckpt, dev.get())->hyperparameters()), kLr);

  const std::string example = HPU_SOURCE_DIR "/examples/fashion_mnist.json";
  hpu::Job job = hpu::parse_job(slurp(example), example);
  job.optimizer = spec().optimizer;
  job.scheduler.name = "cosine";
  job.scheduler.min_lr = 1e-4 / 3.0;
  const hpu::Job back = hpu::parse_job(hpu::job_to_json(job), "job_to_json");
  EXPECT_EQ(back.optimizer.lr, kLr);
  EXPECT_EQ(back.optimizer.weight_decay, 0.0123456789012345678);
  EXPECT_EQ(back.scheduler.min_lr, 1e-4 / 3.0);
  EXPECT_EQ(hpu::job_to_json(back), hpu::job_to_json(job));
}
